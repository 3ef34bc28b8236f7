"""Numbers computed from the model: cost, position checks, rewired variants, training stability."""
