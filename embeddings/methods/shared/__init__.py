"""Not a method: the tensor primitives several methods' objectives share (in-batch loss, GradCache, fp32)."""
