# Net::HTTP over HTTPS, a new connection per request, with a verify
# callback that allocates enough to run the garbage collector, which frees
# earlier requests' SSLSockets (SSL_free) from inside the handshake -- or,
# under the shim, from inside its re-verification of a pooled connection.
# Prints every body.
# Usage: ruby nethttp_verify_gc.rb HOST PORT PATH N CAFILE
require 'net/http'
host, port, path, n, ca = ARGV[0], Integer(ARGV[1]), ARGV[2], Integer(ARGV[3]), ARGV[4]
$stdout.binmode
n.times do
  Net::HTTP.start(host, port, use_ssl: true, ca_file: ca,
                  verify_callback: lambda { |ok, _store|
                    Array.new(20_000) { 'x' * 50 }
                    GC.start
                    ok
                  }) do |h|
    $stdout.write(h.get(path).body)
  end
end
