#!/usr/bin/env node
// Logs every DNS query it gets (UDP, 127.0.0.1:53 by default) as a JSON line to DNSLOG_FILE and answers NXDOMAIN,
// so a run in a loopback-only namespace (with /etc/resolv.conf bind-mounted to `nameserver 127.0.0.1`) shows which
// hosts an agent tries to reach besides its base URL, without any of that traffic leaving the namespace.
import { createSocket } from "node:dgram"
import { appendFileSync } from "node:fs"

const FILE = process.env.DNSLOG_FILE ?? "dns.jsonl"
const HOST = process.env.DNSLOG_HOST ?? "127.0.0.1"
const PORT = Number(process.env.DNSLOG_PORT ?? 53)
const TYPES = { 1: "A", 28: "AAAA", 5: "CNAME", 15: "MX", 16: "TXT", 33: "SRV", 65: "HTTPS", 12: "PTR" }
const t0 = Date.now()

function parseQuestion(msg) {
  let i = 12
  const labels = []
  while (i < msg.length && msg[i] !== 0) {
    const len = msg[i]
    labels.push(msg.subarray(i + 1, i + 1 + len).toString("ascii"))
    i += 1 + len
  }
  const end = i + 5 // zero byte + QTYPE + QCLASS
  return { name: labels.join("."), qtype: msg.readUInt16BE(i + 1), end }
}

const sock = createSocket("udp4")
sock.on("message", (msg, rinfo) => {
  try {
    const { name, qtype, end } = parseQuestion(msg)
    appendFileSync(FILE, JSON.stringify({ t_ms: Date.now() - t0, name, type: TYPES[qtype] ?? qtype }) + "\n")
    const header = Buffer.alloc(12)
    msg.copy(header, 0, 0, 2) // id
    header.writeUInt16BE(0x8183, 2) // response, recursion desired+available, NXDOMAIN
    header.writeUInt16BE(1, 4) // one question, no answers
    sock.send(Buffer.concat([header, msg.subarray(12, end)]), rinfo.port, rinfo.address)
  } catch (e) {
    appendFileSync(FILE, JSON.stringify({ error: String(e) }) + "\n")
  }
})
sock.bind(PORT, HOST)
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0))
