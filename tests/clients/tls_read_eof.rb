# A raw TLS client: OpenSSL::SSL::SSLSocket over a new TCPSocket per
# request, "Connection: close", read to EOF (SSL_read until its clean TLS
# EOF), then close (SSL_shutdown, close).  Prints every raw response.
# Usage: ruby tls_read_eof.rb HOST PORT CAFILE N
require 'socket'
require 'openssl'
host, port, ca, n = ARGV[0], Integer(ARGV[1]), ARGV[2], Integer(ARGV[3])
ctx = OpenSSL::SSL::SSLContext.new
ctx.set_params(ca_file: ca, verify_mode: OpenSSL::SSL::VERIFY_PEER)
$stdout.binmode
n.times do |i|
  ssl = OpenSSL::SSL::SSLSocket.new(TCPSocket.new(host, port), ctx)
  ssl.sync_close = true
  ssl.hostname = 'localhost'
  ssl.connect
  ssl.post_connection_check('localhost')
  ssl.write("GET /echo/#{i} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
  $stdout.write(ssl.read)
  ssl.close
end
