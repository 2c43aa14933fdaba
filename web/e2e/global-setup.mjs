// Before the browser tests: stories260K as .mlb (native converter) and a slower random model with
// stories260K's tokenizer (the stop test needs a generation that lasts), in web/artifacts/.
import { nativeMlb, slowModel } from '../test/native.mjs';

export default function setup() {
  nativeMlb();
  slowModel();
}
