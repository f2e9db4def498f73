"""The parts of an attention model both tasks build on: `attention` (the score functions and `Attention`, the
softmax over a grid and the context it reads), `encoder` (a pretrained CNN -> a grid of annotation vectors, with the
transform its weights expect), `fast_path` (the additive score's CPU speed-up, the same function, taken at a flag),
`options` (the error a constructor raises for an option it cannot be built with) and `pretrained` (the record of a
bundled model, and the photo a user hands `Captioner` or `Answerer`)."""
