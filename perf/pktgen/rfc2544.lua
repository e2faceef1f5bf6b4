-- RFC 2544 throughput sweep for pktgen-dpdk (23.03) against raceway. Self-contained: it
-- needs nothing from pktgen's source tree, only the `pktgen` Lua API.
--
-- pktgen port TX_PORT sends UDP to 10.0.1.2 (destination port 4791, RoCEv2); raceway routes
-- 10.0.1.0/24 to the port facing pktgen port RX_PORT (raceway-2port.toml: another port;
-- raceway-memif.toml: back out of the same one, so RX_PORT = TX_PORT). For each frame size it
-- tries 100 % of line rate first, then searches by halves for the highest rate at which every
-- frame sent came back.
--
-- A trial counts only if pktgen really sent at the rate asked: when it sent fewer than 99 % of
-- the frames that rate means over the trial (a CPU-starved generator), the trial proves
-- nothing, the search goes no higher, and the verdict says "generator-limited" with the
-- highest rate the generator reached. Results go to stdout and to a CSV file.
--
-- Settings come from the environment (defaults in brackets):
--   PKTGEN_TX_PORT [0]  PKTGEN_RX_PORT [1]  RACEWAY_MAC [02:00:00:00:00:01]
--   PKTGEN_SIZES [64,128,256,512,1024,1280,1518]  PKTGEN_TRIAL_MS [10000]  PKTGEN_STEPS [7]
--   PKTGEN_CSV [rfc2544.csv]
-- Run it at start:  pktgen ... -- -P -m "1.0" -f perf/pktgen/rfc2544.lua
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

-- One trial: frames sent, frames received, and frames the rate asks for in the trial.
local function trial(size, rate, mbps)
  pktgen.clr()
  pktgen.set(tx_port, "size", size)
  pktgen.set(tx_port, "rate", rate)
  pktgen.delay(500)
  pktgen.start(tx_port)
  pktgen.delay(trial_ms)
  pktgen.stop(tx_port)
  pktgen.delay(settle_ms)
  local stats = pktgen.portStats("all", "port")
  local sent = stats[tonumber(tx_port)]["opackets"]
  local received = stats[tonumber(rx_port)]["ipackets"]
  -- pktgen's size includes the FCS; preamble and inter-frame gap add 20 bytes on the wire.
  local asked = rate / 100 * mbps * 1e6 / ((size + 20) * 8) * trial_ms / 1000
  return sent, received, asked
end

local csv = assert(io.open(csv_path, "w"))
local header = "size,link_mbps,zero_loss_percent,zero_loss_mpps,frames_sent,frames_received,"
  .. "generator_max_percent,verdict\n"
csv:write(header)
printf("%s", header)
for _, size in ipairs(sizes) do
  local mbps = link_mbps(tx_port)
  local best, best_sent, best_received = 0, 0, 0
  local generator_max = 0          -- the most pktgen sent when asked for more, in % of line rate
  local limited, lost = false, false
  local low, high = 0, 100
  local rate = 100
  for step = 0, steps do
    local sent, received, asked = trial(size, rate, mbps)
    printf("# size %d rate %.2f%%: asked %.0f sent %d received %d\n", size, rate, asked, sent, received)
    if asked == 0 or sent < sent_enough * asked then
      -- Not a test of raceway: pktgen could not send this fast. Search below what it reached.
      limited = true
      local reached = asked > 0 and rate * sent / asked or 0
      generator_max = math.max(generator_max, reached)
      high = math.min(rate, reached)
    elseif received >= sent then
      low, best, best_sent, best_received = rate, rate, sent, received
    else
      lost = true
      high = rate
    end
    if step == 0 and best == 100 then break end
    rate = (low + high) / 2
  end
  local verdict
  if best == 100 then
    verdict = "line-rate"
  elseif lost then
    verdict = "loss-above"     -- raceway lost frames at some rate the generator did send
  elseif limited then
    verdict = "generator-limited"
  else
    verdict = "none"
  end
  local mpps = best / 100 * mbps / ((size + 20) * 8)
  local row = string.format("%d,%d,%.2f,%.3f,%d,%d,%.2f,%s\n", size, mbps, best, mpps, best_sent,
    best_received, generator_max, verdict)
  csv:write(row)
  csv:flush()
  printf("%s", row)
end
csv:close()
printf("# results in %s\n", csv_path)
pktgen.quit()
