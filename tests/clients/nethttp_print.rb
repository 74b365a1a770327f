#!/usr/bin/ruby
# nethttp_print.rb HOST PORT METHOD PATH N - N requests, each with its own
# Net::HTTP.start (one connection per request), METHOD GET, HEAD or POST (a
# small body); prints "== i", the status and the body, or "ERROR <class>"
# and carries on.  max_retries 0: Net::HTTP would otherwise re-send an
# idempotent request after an EOF and hide what the server did.
require 'net/http'

host, port, meth, path, n = ARGV[0], Integer(ARGV[1]), ARGV[2].upcase, ARGV[3], Integer(ARGV[4])
$stdout.binmode
n.times do |i|
  $stdout.write("== #{i + 1}\n")
  begin
    Net::HTTP.start(host, port, open_timeout: 10, read_timeout: 10, max_retries: 0) do |h|
      req = case meth
            when 'HEAD' then Net::HTTP::Head.new(path)
            when 'POST' then Net::HTTP::Post.new(path).tap { |r| r.body = 'x' * 100 }
            else Net::HTTP::Get.new(path)
            end
      res = h.request(req)
      $stdout.write("#{res.code} #{res.message}\n#{res.body}\n")
    end
  rescue StandardError => e
    $stdout.write("ERROR #{e.class}\n")
  end
end
