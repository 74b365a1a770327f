# Ruby's side of tls_trust.py: one process, many SSL contexts, one HTTPS
# request per step on its own connection (TCPSocket + SSLSocket,
# "Connection: close", read to EOF).  Under the shim the connections of
# earlier steps sit in the pool; each step must end exactly as it does
# without the shim.  Prints "<step> ok <status line> <body>" or
# "<step> fail <reason>".
# Usage: ruby tls_trust.rb PORT TLSDIR STEP...
#   STEP = [2x]CTX@NAME: CTX one of
#     trust     verify the test CA, verify_hostname = true
#     nohost    verify the test CA, verify_hostname = false
#     cb+a      trust, client certificate a supplied by client_cert_cb
#     trust+a   trust, client certificate a set in the context
#   NAME the hostname (SNI and the name to verify).  "2x": two connections
#   opened together (both handshakes before either request): the second
#   cannot have a pooled connection, so it is the resumption path.
require 'socket'
require 'openssl'

port, tls = Integer(ARGV.fetch(0)), ARGV.fetch(1)

def context(tls, kind)
  ctx = OpenSSL::SSL::SSLContext.new
  ctx.verify_mode = OpenSSL::SSL::VERIFY_PEER
  ctx.ca_file = "#{tls}/ca.pem"
  base, cert = kind.split('+', 2)
  ctx.verify_hostname = base != 'nohost'
  if cert
    crt = OpenSSL::X509::Certificate.new(File.read("#{tls}/client-#{cert}.pem"))
    key = OpenSSL::PKey.read(File.read("#{tls}/client-#{cert}.key"))
    if base == 'cb'
      ctx.client_cert_cb = proc { [crt, key] }
    else
      ctx.cert = crt
      ctx.key = key
    end
  end
  ctx
end

def connect(port, tls, kind, name)
  ssl = OpenSSL::SSL::SSLSocket.new(TCPSocket.new('127.0.0.1', port), context(tls, kind))
  ssl.hostname = name
  ssl.sync_close = true
  ssl.connect
  ssl
end

def fetch(ssl, i, name)
  ssl.write("GET /echo/#{i} HTTP/1.1\r\nHost: #{name}\r\nConnection: close\r\n\r\n")
  data = ssl.read
  ssl.close
  head, body = data.split("\r\n\r\n", 2)
  "#{head.lines.first.chomp} #{body.to_s.strip}"
end

def report(label)
  puts "#{label} ok #{yield}"
rescue OpenSSL::SSL::SSLError, SystemCallError, IOError => e
  reason = e.message[/hostname mismatch/i]&.downcase ||
           e.message[/certificate verify failed|alert [a-z ]+/] || e.class.name
  puts "#{label} fail #{reason}"
end

$stdout.sync = true
i = 0
ARGV.drop(2).each do |step|
  spec = step.delete_prefix('2x')
  kind, name = spec.split('@', 2)
  if spec == step
    report(step) { fetch(connect(port, tls, kind, name), i += 1, name) }
  else
    socks = []
    2.times do |k|
      report("#{step} connect #{k + 1}") { socks << connect(port, tls, kind, name); 'connected' }
    end
    socks.each_with_index { |s, k| report("#{step} #{k + 1}") { fetch(s, i += 1, name) } }
  end
end
