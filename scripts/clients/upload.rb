# upload.rb HOST PORT FILE MODE - one upload of FILE, printing the server's
# answer (the sink answers the SHA-1 of what it received).
#   sendfile: a TCPSocket, the head, then IO.copy_stream(file, socket),
#             which the kernel does with sendfile(2) (Content-Length)
#   chunked:  Net::HTTP with body_stream and Transfer-Encoding: chunked
require 'socket'
require 'net/http'
host, port, file, mode = ARGV.fetch(0), Integer(ARGV.fetch(1)), ARGV.fetch(2), ARGV.fetch(3)
size = File.size(file)
case mode
when 'sendfile'
  s = TCPSocket.new(host, port)
  s.write("POST /upload HTTP/1.1\r\nHost: #{host}:#{port}\r\nContent-Length: #{size}\r\n" \
          "Connection: close\r\n\r\n")
  File.open(file, 'rb') { |f| IO.copy_stream(f, s) }
  res = s.read
  s.close
  puts res.split("\r\n\r\n", 2)[1]
when 'chunked'
  Net::HTTP.start(host, port, read_timeout: 600) do |h|
    req = Net::HTTP::Post.new('/upload')
    req['Transfer-Encoding'] = 'chunked'
    File.open(file, 'rb') do |f|
      req.body_stream = f
      puts h.request(req).body
    end
  end
else
  abort 'mode: sendfile or chunked'
end
