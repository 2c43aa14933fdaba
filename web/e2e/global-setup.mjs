// Before the browser tests: stories260K as .mlb (native converter) and a slower random model with
// stories260K's tokenizer (the stop test needs a generation that lasts), in web/artifacts/; random
// models with SmolLM2's tokenizer and a chat template (the chat tests), in web/artifacts/hf/.
import { models } from '../test/hf-models.mjs';
import { nativeMlb, slowModel } from '../test/native.mjs';

export default function setup() {
  nativeMlb();
  slowModel();
  models();
}
