#!/usr/bin/ruby
# pauses.rb HOST PORT N METHOD SEED MAX_PAUSE_MS - N requests, each on its own
# connection (Net::HTTP.start(host, port) { |h| ... }: the unmodified-program
# pattern), with random pauses between them: the client for stale pooled
# connections (servers that close, 408 or reset idle connections).
#
#   METHOD        GET or POST; request i (1..N) is METHOD /r/<i>, a POST with
#                 the body "id=<i>" (Content-Length, form-urlencoded)
#   SEED          Random.new(SEED): the same pauses on every run (not the
#                 same as pauses.py's for the same SEED)
#   MAX_PAUSE_MS  after each request but the last, sleep rand(0..MAX_PAUSE_MS) ms
#
# Prints "<i> <status> <body>" per request (the body with one trailing
# newline dropped), or "ERROR <i> <exception class>: <message>" and carries
# on; exits 1 if any request raised.  A non-2xx status is printed, not an
# error.  open/read timeouts are 10 s, and max_retries is 0: Net::HTTP would
# otherwise silently re-send an idempotent request once after a reset or an
# EOF, and hide exactly the errors this client is here to show.
require 'net/http'

if ARGV.length != 6
  warn 'usage: pauses.rb HOST PORT N METHOD SEED MAX_PAUSE_MS'
  exit 2
end
host = ARGV[0]
port = Integer(ARGV[1])
count = Integer(ARGV[2])
method = ARGV[3].upcase
rng = Random.new(Integer(ARGV[4]))
max_pause = Integer(ARGV[5])
unless %w[GET POST].include?(method)
  warn "pauses.rb: METHOD must be GET or POST, not #{ARGV[3]}"
  exit 2
end

$stdout.sync = true
errors = 0
(1..count).each do |i|
  begin
    Net::HTTP.start(host, port, open_timeout: 10, read_timeout: 10, max_retries: 0) do |h|
      res = if method == 'GET'
              h.get("/r/#{i}")
            else
              h.post("/r/#{i}", "id=#{i}", 'Content-Type' => 'application/x-www-form-urlencoded')
            end
      puts "#{i} #{res.code} #{res.body.to_s.chomp("\n")}"
    end
  rescue StandardError => e
    errors += 1
    puts "ERROR #{i} #{e.class}: #{e.message}"
  end
  sleep(rng.rand(0..max_pause) / 1000.0) if i < count
end
exit(errors.zero? ? 0 : 1)
