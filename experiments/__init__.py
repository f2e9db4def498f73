"""The attention studies: scripts and Lightning callbacks that ask a question of a trained model, and the variants of
the papers' networks that the experiments trained (`san_variants`, `decoder_variants`). The figures they gave are in
docs/experiments.md; what each one asks is in this folder's README.md."""
