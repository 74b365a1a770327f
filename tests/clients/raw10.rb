#!/usr/bin/ruby
# raw10.rb HOST PORT PATH COUNT - COUNT times: TCPSocket.new, one HTTP/1.0
# request with "Connection: close", read to EOF, print everything read
# (status line, headers and body).
require 'socket'

host, port, path = ARGV.fetch(0), Integer(ARGV.fetch(1)), ARGV.fetch(2)
count = Integer(ARGV.fetch(3))
hosthdr = host.include?(':') ? "[#{host}]:#{port}" : "#{host}:#{port}"
$stdout.binmode
count.times do
  s = TCPSocket.new(host, port)
  s.write("GET #{path} HTTP/1.0\r\nHost: #{hosthdr}\r\nConnection: close\r\n\r\n")
  $stdout.write(s.read)
  s.close
end
