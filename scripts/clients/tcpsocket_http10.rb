# A raw TCPSocket per request: HTTP/1.0, Connection: close, read to EOF
# (the classic benchmark this project started from).  Prints every response
# whole; "rate=<requests/s>" on stderr.
# Usage: ruby tcpsocket_http10.rb HOST PORT PATH N
require 'socket'
host, port, path, n = ARGV.fetch(0), Integer(ARGV.fetch(1)), ARGV.fetch(2), Integer(ARGV.fetch(3))
hosthdr = host.include?(':') ? "[#{host}]:#{port}" : "#{host}:#{port}"
$stdout.binmode
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
n.times do
  s = TCPSocket.new(host, port)
  s.write("GET #{path} HTTP/1.0\r\nHost: #{hosthdr}\r\nConnection: close\r\n\r\n")
  $stdout.write(s.read)
  s.close
end
$stderr.puts "rate=#{(n / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)).round}"
