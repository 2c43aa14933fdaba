// The worker's entry: a browser module Worker (self) or a node worker_thread (parentPort).
import { Host } from './host.js';

const inNode = typeof process === 'object' && !!process.versions?.node && typeof self === 'undefined';
if (inNode) {
  const { parentPort } = await import('node:worker_threads');
  const host = new Host((m) => parentPort.postMessage(m));
  parentPort.on('message', (m) => host.handle(m));
} else {
  const host = new Host((m) => self.postMessage(m));
  self.onmessage = (e) => host.handle(e.data);
}
