// The package's error: a message naming the file, field or value at fault, and a kind: the
// engine's status ('io', 'format', 'shape', 'nomem', 'isa', 'arg') or 'state', 'setup', 'crash', 'error',
// 'abort' (index.d.ts: KraflaErrorKind).
export class KraflaError extends Error {
  constructor(message, kind = 'error') {
    super(message);
    this.name = 'KraflaError';
    this.kind = kind;
  }
}
