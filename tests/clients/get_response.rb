#!/usr/bin/ruby
# get_response.rb URL COUNT - COUNT times Net::HTTP.get_response(URI(URL)),
# printing each body.  Every call opens and closes its own connection.
require 'net/http'

uri = URI(ARGV.fetch(0))
count = Integer(ARGV.fetch(1))
$stdout.binmode
count.times do
  res = Net::HTTP.get_response(uri)
  $stdout.write(res.body.to_s)
end
