# A raw TCPSocket per request: HTTP/1.0, Connection: close, read to EOF.
# Usage: ruby tcpsocket_http10.rb HOST PORT PATH N
require 'socket'
host, port, path, n = ARGV[0], ARGV[1].to_i, ARGV[2], ARGV[3].to_i
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
n.times do
  s = TCPSocket.new(host, port)
  s.write("GET #{path} HTTP/1.0\r\nHost: #{host}\r\nConnection: close\r\n\r\n")
  $stdout.write(s.read)
  s.close
end
$stderr.puts "rate=#{(n / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)).round}"
