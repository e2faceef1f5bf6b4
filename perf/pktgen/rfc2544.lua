-- RFC 2544 throughput sweep for pktgen-dpdk (23.03) against raceway. Self-contained: it
-- needs nothing from pktgen's source tree, only the `pktgen` Lua API.
--
-- pktgen port TX_PORT sends UDP to 10.0.1.2 (destination port 4791, RoCEv2); raceway routes
-- 10.0.1.0/24 to the port facing pktgen port RX_PORT (raceway-2port.toml: another port;
-- raceway-memif.toml: back out of the same one, so RX_PORT = TX_PORT). For each frame size it
-- tries 100 % of line rate first, then searches by halves for the highest rate at which every
-- frame sent came back.
--
-- Every figure is measured. Each trial is timed with the wall clock (`date`, read just before
-- pktgen starts and just after it stops: pktgen.delay sleeps in 10 ms steps and a busy CPU
-- stretches a trial well past its nominal length), and what the asked rate means in frames is
-- computed over that real time. A trial proves zero loss only if pktgen sent at least 99 % of
-- those frames and every one came back; one where the generator sent fewer (short of CPU)
-- proves nothing, the search goes no higher than what it reached, and the verdict says
-- "generator-limited". The reported rate is the best passing trial's measured one (frames
-- sent over its real time), and it only ever rises: a lower passing trial later in the
-- search never replaces it. Results go to stdout and to a CSV file.
--
-- Settings come from the environment (defaults in brackets):
--   PKTGEN_TX_PORT [0]  PKTGEN_RX_PORT [1]  RACEWAY_MAC [02:00:00:00:00:01]
--   PKTGEN_SIZES [64,128,256,512,1024,1280,1518]  PKTGEN_TRIAL_MS [10000]  PKTGEN_STEPS [7]
--   PKTGEN_CSV [rfc2544.csv]
-- Run it at start:  pktgen ... -- -P -m "0.0" -f perf/pktgen/rfc2544.lua
-- (pktgen quits when the sweep ends), or from pktgen's prompt:  load perf/pktgen/rfc2544.lua

local function env(name, default) return os.getenv(name) or default end
local function printf(...) io.write(string.format(...)); io.flush() end

local tx_port = env("PKTGEN_TX_PORT", "0")
local rx_port = env("PKTGEN_RX_PORT", "1")
local raceway_mac = env("RACEWAY_MAC", "02:00:00:00:00:01")
local trial_ms = tonumber(env("PKTGEN_TRIAL_MS", "10000")) -- RFC 2544 asks for 60 s per trial
local steps = tonumber(env("PKTGEN_STEPS", "7"))            -- trials after the one at 100 %
local csv_path = env("PKTGEN_CSV", "rfc2544.csv")
local settle_ms = 2000        -- let queues drain before reading counters
local sent_enough = 0.99      -- of the frames the rate asks for, or the generator was the limit
local sizes = {}
for size in string.gmatch(env("PKTGEN_SIZES", "64,128,256,512,1024,1280,1518"), "%d+") do
  sizes[#sizes + 1] = tonumber(size)
end

-- The link speed pktgen paces to, in Mb/s (it reads "<UP-100000-FD>").
local function link_mbps(port)
  local state = pktgen.linkState(port)[tonumber(port)] or ""
  return tonumber(string.match(state, "UP%-(%d+)")) or 0
end

pktgen.screen("off")
pktgen.set_mac(tx_port, "dst", raceway_mac)
pktgen.set_ipaddr(tx_port, "src", "10.0.0.2/24")
pktgen.set_ipaddr(tx_port, "dst", "10.0.1.2")
pktgen.set_proto(tx_port, "udp")
pktgen.set(tx_port, "sport", 49152)
pktgen.set(tx_port, "dport", 4791)     -- RoCEv2's port: raceway parses the payload as a BTH
pktgen.set(tx_port, "count", 0)        -- send until stopped
pktgen.set(tx_port, "burst", 32)

-- Wall-clock seconds (pktgen's Lua has no clock of its own finer than os.time's seconds).
local function now_s()
  local date = assert(io.popen("date +%s.%N"))
  local seconds = tonumber(date:read("*l"))
  date:close()
  return seconds
end

-- One trial at `rate` % of line rate: frames sent and received, its real length in seconds,
-- and the frames `rate` asks for over that time.
local function trial(size, rate, mbps)
  pktgen.clr()
  pktgen.set(tx_port, "size", size)
  pktgen.set(tx_port, "rate", rate)
  pktgen.delay(500)
  local started = now_s()
  pktgen.start(tx_port)
  pktgen.delay(trial_ms)
  pktgen.stop(tx_port)
  local seconds = now_s() - started
  pktgen.delay(settle_ms)
  local stats = pktgen.portStats("all", "port")
  local sent = stats[tonumber(tx_port)]["opackets"]
  local received = stats[tonumber(rx_port)]["ipackets"]
  -- pktgen's size includes the FCS; preamble and inter-frame gap add 20 bytes on the wire.
  local line_fps = mbps * 1e6 / ((size + 20) * 8)
  local asked = rate / 100 * line_fps * seconds
  return sent, received, seconds, asked, line_fps
end

local csv = assert(io.open(csv_path, "w"))
local header = "size,link_mbps,zero_loss_percent,zero_loss_mpps,trial_s,frames_sent,frames_received,"
  .. "asked_percent,generator_max_percent,verdict\n"
csv:write(header)
printf("%s", header)
for _, size in ipairs(sizes) do
  local mbps = link_mbps(tx_port)
  -- The best passing trial: measured % of line rate and Mpps, its length, frames, the rate asked.
  local best = { percent = 0, mpps = 0, seconds = 0, sent = 0, received = 0, asked = 0 }
  local generator_max = 0          -- the most pktgen sent when asked for more, in % of line rate
  local limited, lost = false, false
  local low, high = 0, 100
  local rate = 100
  for step = 0, steps do
    local sent, received, seconds, asked, line_fps = trial(size, rate, mbps)
    local measured = seconds > 0 and 100 * sent / (line_fps * seconds) or 0
    printf("# size %d rate %.2f%%: %.3f s, asked %.0f sent %d (%.3f%%) received %d\n", size, rate, seconds,
      asked, sent, measured, received)
    if asked == 0 or sent < sent_enough * asked then
      -- Not a test of raceway: pktgen could not send this fast. Search below what it reached.
      limited = true
      generator_max = math.max(generator_max, measured)
      high = math.min(rate, measured)
    elseif received >= sent then
      low = rate
      if measured > best.percent then
        best = { percent = measured, mpps = sent / seconds / 1e6, seconds = seconds, sent = sent,
                 received = received, asked = rate }
      end
    else
      lost = true
      high = rate
    end
    if step == 0 and best.asked == 100 then break end
    rate = (low + high) / 2
  end
  local verdict
  if best.asked == 100 then
    verdict = "line-rate"
  elseif lost then
    verdict = "loss-above"     -- raceway lost frames at some rate the generator did send
  elseif limited then
    verdict = "generator-limited"
  else
    verdict = "none"
  end
  local row = string.format("%d,%d,%.3f,%.4f,%.3f,%d,%d,%.2f,%.3f,%s\n", size, mbps, best.percent, best.mpps,
    best.seconds, best.sent, best.received, best.asked, generator_max, verdict)
  csv:write(row)
  csv:flush()
  printf("%s", row)
end
csv:close()
printf("# results in %s\n", csv_path)
pktgen.quit()
