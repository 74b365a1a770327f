# Net::HTTP with a fresh Net::HTTP.start per request (the unmodified pattern
# libkeepalive exists for).  Prints every body (for HEAD: "code length");
# "rate=<requests/s>" on stderr.
# With CAFILE: HTTPS, verifying the server with that CA (and its hostname).
# Usage: ruby nethttp_fresh.rb HOST PORT PATH N [GET|HEAD] [CAFILE]
require 'net/http'
host, port, path, n = ARGV.fetch(0), Integer(ARGV.fetch(1)), ARGV.fetch(2), Integer(ARGV.fetch(3))
method = ARGV.fetch(4, 'GET')
ca = ARGV[5]
opts = ca ? { use_ssl: true, ca_file: ca, verify_mode: OpenSSL::SSL::VERIFY_PEER } : {}
$stdout.binmode
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
n.times do
  Net::HTTP.start(host, port, **opts) do |h|
    res = method == 'HEAD' ? h.head(path) : h.get(path)
    $stdout.write("#{res.code} #{res['content-length']}\n") if method == 'HEAD'
    $stdout.write(res.body.to_s)
  end
end
$stderr.puts "rate=#{(n / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)).round}"
