// libreccl.so is assembled from the static parts (whole-archive); a target needs one source.
