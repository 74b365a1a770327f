// node_get.js - Node's http.get with `agent: false` (a new connection per
// request: libuv, epoll, non-blocking sockets, closed with syscall(SYS_close)),
// N requests one after the other; prints each status line, headers and body.
// Usage: node node_get.js HOST PORT PATH N
'use strict';
const http = require('http');
const [host, port, path, n] = process.argv.slice(2);
const total = parseInt(n, 10);
let i = 0;
function next() {
  if (i === total) return;
  i++;
  http.get({ host, port, path, agent: false }, (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => {
      process.stdout.write(`== ${i} ${res.statusCode} ${res.headers['content-length']}\n`);
      process.stdout.write(Buffer.concat(chunks));
      next();
    });
  }).on('error', (e) => {
    process.stdout.write(`ERROR ${i} ${e.code || e.message}\n`);
    process.exitCode = 1;
    next();
  });
}
next();
