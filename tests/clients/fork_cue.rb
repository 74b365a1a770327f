# fork_cue.rb HOST PORT PATH DIR - Net::HTTP GETs PATH ("Connection:
# close") in a thread; once the request has crossed nginx (the fifo
# DIR/got, tests/servers/cue.py) the main thread forks (the child exit!s),
# then cues the upstream's answer (DIR/cue).  Prints what Net::HTTP got.
# (Net::HTTP retries an idempotent request whose connection ended early:
# a cancelled GET would reach the upstream twice.)
require 'net/http'
host, port, path, dir = ARGV[0], ARGV[1].to_i, ARGV[2], ARGV[3]
res = nil
t = Thread.new do
  begin
    Net::HTTP.start(host, port, read_timeout: 60) do |h|
      req = Net::HTTP::Get.new(path)
      req['Connection'] = 'close'
      r = h.request(req)
      res = [r.code, r.body]
    end
  rescue => e
    res = e.class.name
  end
end
File.open(File.join(dir, 'got')) { |f| f.gets }
pid = fork { exit!(0) }
Process.wait(pid)
File.open(File.join(dir, 'cue'), 'w') { |f| f.write("go\n") }
t.join
p res
