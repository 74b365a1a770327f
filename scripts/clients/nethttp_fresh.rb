# Net::HTTP with a fresh Net::HTTP.start per request (the unmodified
# pattern libkeepalive exists for).  Usage: ruby nethttp_fresh.rb HOST PORT PATH N
require 'net/http'
host, port, path, n = ARGV[0], ARGV[1].to_i, ARGV[2], ARGV[3].to_i
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
n.times { Net::HTTP.start(host, port) { |h| $stdout.write(h.get(path).body) } }
$stderr.puts "rate=#{(n / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)).round}"
