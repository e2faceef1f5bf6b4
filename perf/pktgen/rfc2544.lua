-- RFC 2544 throughput sweep for pktgen-dpdk against raceway.
--
-- pktgen port 0 sends to raceway's "gen" port; raceway routes 10.0.1.0/24 out of its "sink"
-- port back into pktgen port 1 (see raceway-2port.toml). For each frame size, a binary
-- search finds the highest rate (percent of line rate) at which port 1 receives every frame
-- port 0 sent during a trial. Run from pktgen's prompt with:  load perf/pktgen/rfc2544.lua
-- or at start with:  pktgen ... -- -P -m "[2:3].0,[4:5].1" -f perf/pktgen/rfc2544.lua

package.path = package.path .. ";?.lua;test/?.lua;app/?.lua;"
require "Pktgen"

local tx_port = "0"
local rx_port = "1"
local sizes = { 64, 128, 256, 512, 1024, 1280, 1518 }
local trial_ms = 10000      -- RFC 2544 asks for at least 60 s per trial; shorten for a quick look
local settle_ms = 2000      -- let queues drain before reading counters
local iterations = 8        -- binary search steps: resolution 100 / 2^8 = 0.4 % of line rate
-- Set these to the MACs on the wire: raceway's "gen" port, and pktgen port 1 (raceway's peer).
local raceway_mac = "02:00:00:00:00:01"

pktgen.screen("off")
pktgen.set_mac(tx_port, "dst", raceway_mac)
pktgen.set_ipaddr(tx_port, "src", "10.0.0.2/24")
pktgen.set_ipaddr(tx_port, "dst", "10.0.1.2")
pktgen.set_proto(tx_port, "udp")
pktgen.set(tx_port, "sport", 49152)
pktgen.set(tx_port, "dport", 4791)     -- RoCEv2's port: raceway parses the payload as a BTH
pktgen.set(tx_port, "count", 0)        -- send until stopped
pktgen.set(tx_port, "burst", 32)

local function trial(size, rate)
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
  return sent, received
end

printf("size,zero_loss_rate_percent,frames_sent,frames_received\n")
for _, size in ipairs(sizes) do
  local low, high, best = 0, 100, 0
  local best_sent, best_received = 0, 0
  for _ = 1, iterations do
    local rate = (low + high) / 2
    local sent, received = trial(size, rate)
    if sent > 0 and received >= sent then
      low, best, best_sent, best_received = rate, rate, sent, received
    else
      high = rate
    end
  end
  printf("%d,%.2f,%d,%d\n", size, best, best_sent, best_received)
end
