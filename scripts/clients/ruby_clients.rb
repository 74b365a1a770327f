# ruby_clients.rb - the Ruby HTTP clients of scripts/bench, each used the way
# an unmodified program uses it: a new connection per request, except
# "nethttp_post" (Net::HTTP.post of a 1 KiB body per request to /post/PATH),
# "nethttp_keep" (one Net::HTTP.start around all requests: the ideal a shim
# can approach) and "persistent" (Net::HTTP::Persistent: the library-level
# fix, for reference).  Prints every body; "rate=<requests/s>" on stderr
# (timed around the requests only: interpreter and gem start-up excluded).
# With "https": HTTPS, trusting what OpenSSL's default paths trust (the
# bench sets SSL_CERT_FILE to its test CA).
# Usage: ruby ruby_clients.rb CLIENT HOST PORT PATH N [https]
client, host, port, path, n = ARGV.fetch(0), ARGV.fetch(1), Integer(ARGV.fetch(2)), ARGV.fetch(3),
                               Integer(ARGV.fetch(4))
tls = ARGV[5] == 'https'
url = "#{tls ? 'https' : 'http'}://#{host.include?(':') ? "[#{host}]" : host}:#{port}#{path}"
$stdout.binmode

get = case client
      when 'nethttp'
        require 'net/http'
        -> { Net::HTTP.start(host, port, use_ssl: tls) { |h| h.get(path).body } }
      when 'nethttp_post'
        # an API client's POST (a webhook, a JSON record): Net::HTTP.post
        # makes a connection per call; nginx answers /post/... with its URI
        require 'net/http'
        uri = URI(url.sub("#{port}#{path}", "#{port}/post#{path}"))
        body = 'x' * 1024
        -> { Net::HTTP.post(uri, body, 'Content-Type' => 'application/octet-stream').body }
      when 'nethttp_keep'
        require 'net/http'
        conn = Net::HTTP.start(host, port, use_ssl: tls)
        -> { conn.get(path).body }
      when 'persistent'
        require 'net/http/persistent'
        pers = Net::HTTP::Persistent.new
        uri = URI(url)
        -> { pers.request(uri).body }
      when 'excon'
        require 'excon'
        -> { Excon.get(url).body }
      when 'httprb'
        require 'http'
        -> { HTTP.get(url).to_s }
      when 'typhoeus'
        require 'typhoeus'
        -> { Typhoeus.get(url).body }
      when 'httpclient'
        require 'httpclient'
        -> { HTTPClient.get(url).body }
      when 'curb'
        require 'curb'
        # curb 1.0 keeps each request's connection in a Curl::Multi until
        # garbage collection unless told otherwise (docs/design.md §8)
        Curl::Multi.autoclose = true
        -> { Curl.get(url).body_str }
      else
        abort "unknown client #{client}"
      end

t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
n.times { $stdout.write(get.call) }
dt = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
$stderr.puts "rate=#{n.zero? ? 0 : (n / dt).round}"
