"""Attention maps after the model made them: `overlays` (a map drawn over the photo, at the encoder's own resize) and
`measures` (what a map is: its entropy and concentration, and where it lands: the mass inside a ground-truth box and
the pointing game)."""
