package engine

// Checkpointer is implemented by engines that can copy the whole store to
// a directory while it is in use (Pebble's checkpoint): an online backup.
type Checkpointer interface {
	// Checkpoint writes a copy of the store to dir, which must not exist
	// (its parent directories are created). The copy is consistent: it is
	// the store as of one moment between the call and its return, so it
	// holds every batch whose Apply returned before the call, and each
	// batch whole or not at all. Writers go on meanwhile. The copy is a
	// store of its own, opened like any other. If Checkpoint fails, dir is
	// removed.
	Checkpoint(dir string) error
}
