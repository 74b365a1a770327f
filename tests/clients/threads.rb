#!/usr/bin/ruby
# threads.rb PORT NTHREADS NREQ - threads.c with Ruby threads: thread t
# (0..NTHREADS-1) makes NREQ requests i = 0..NREQ-1, each on its own
# connection (Net::HTTP.start("127.0.0.1", PORT) { |h| h.get(...) }), GET
# /echo/<t>-<i>; the body must be exactly "/echo/<t>-<i>\n" (nginx's
# location /echo/).  Prints "requests=<total> mismatches=<m> errors=<e>",
# describes the first failures on stderr, exits 1 on any mismatch or error.
# open/read timeouts 10 s, max_retries 0 (no silent re-send of a GET).
require 'net/http'

if ARGV.length != 3
  warn 'usage: threads.rb PORT NTHREADS NREQ'
  exit 2
end
port = Integer(ARGV[0])
nthreads = Integer(ARGV[1])
nreq = Integer(ARGV[2])

MAX_REPORTS = 10
lock = Mutex.new
mismatches = 0
errors = 0
reports = 0
report = lambda do |msg|
  lock.synchronize do
    reports += 1
    warn msg if reports <= MAX_REPORTS
  end
end

workers = (0...nthreads).map do |t|
  Thread.new do
    nreq.times do |i|
      path = "/echo/#{t}-#{i}"
      begin
        body = Net::HTTP.start('127.0.0.1', port, open_timeout: 10, read_timeout: 10,
                                                  max_retries: 0) do |h|
          h.get(path).body.to_s
        end
        if body != "#{path}\n"
          lock.synchronize { mismatches += 1 }
          report.call("thread #{t} request #{i}: mismatch: #{body.inspect}")
        end
      rescue StandardError => e
        lock.synchronize { errors += 1 }
        report.call("thread #{t} request #{i}: #{e.class}: #{e.message}")
      end
    end
  end
end
workers.each(&:join)
puts "requests=#{nthreads * nreq} mismatches=#{mismatches} errors=#{errors}"
exit(mismatches.zero? && errors.zero? ? 0 : 1)
