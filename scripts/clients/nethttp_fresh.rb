# Net::HTTP with a fresh Net::HTTP.start per request (the unmodified pattern
# libkeepalive exists for).  Prints every body (for HEAD: "code length");
# "rate=<requests/s>" on stderr.
# Usage: ruby nethttp_fresh.rb HOST PORT PATH N [GET|HEAD]
require 'net/http'
host, port, path, n = ARGV.fetch(0), Integer(ARGV.fetch(1)), ARGV.fetch(2), Integer(ARGV.fetch(3))
method = ARGV.fetch(4, 'GET')
$stdout.binmode
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
n.times do
  Net::HTTP.start(host, port) do |h|
    res = method == 'HEAD' ? h.head(path) : h.get(path)
    $stdout.write("#{res.code} #{res['content-length']}\n") if method == 'HEAD'
    $stdout.write(res.body.to_s)
  end
end
$stderr.puts "rate=#{(n / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)).round}"
