#!/usr/bin/ruby
# start_each.rb URL COUNT [METHOD] - COUNT times
# Net::HTTP.start(host, port) { |h| h.get(path) } (or h.head with METHOD=HEAD),
# printing each body.  One connection per request, closed at the block's end.
require 'net/http'

uri = URI(ARGV.fetch(0))
count = Integer(ARGV.fetch(1))
method = ARGV.fetch(2, 'GET')
$stdout.binmode
count.times do
  Net::HTTP.start(uri.hostname, uri.port) do |h|
    res = method == 'HEAD' ? h.head(uri.request_uri) : h.get(uri.request_uri)
    $stdout.write("#{res.code} #{res['content-length']}\n") if method == 'HEAD'
    $stdout.write(res.body.to_s)
  end
end
