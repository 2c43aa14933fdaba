// Stop strings over streamed text: emits text as it comes, holding back only a tail that could
// still be the start of a stop string; on a match emits what precedes it and reports the stop.
export class StopFilter {
  constructor(stops, emit) {
    this.stops = (Array.isArray(stops) ? stops : [stops]).filter((s) => typeof s === 'string' && s.length > 0);
    this.emit = emit;
    this.held = '';
  }

  // Adds text; returns true when a stop string was found (the text before it was emitted).
  push(text) {
    if (!this.stops.length) {
      this.emit(text);
      return false;
    }
    this.held += text;
    let cut = -1;
    for (const s of this.stops) {
      const i = this.held.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      this.emit(this.held.slice(0, cut));
      this.held = '';
      return true;
    }
    // Keep the longest tail that is a prefix of a stop string.
    let keep = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, this.held.length); k > keep; --k) {
        if (this.held.endsWith(s.slice(0, k))) { keep = k; break; }
      }
    }
    // Never hold back half of a surrogate pair.
    let end = this.held.length - keep;
    if (end > 0 && end < this.held.length) {
      const c = this.held.charCodeAt(end - 1);
      if (c >= 0xd800 && c <= 0xdbff) --end;
    }
    this.emit(this.held.slice(0, end));
    this.held = this.held.slice(end);
    return false;
  }

  finish(stopped) {
    if (!stopped && this.held) this.emit(this.held);
    this.held = '';
  }
}
