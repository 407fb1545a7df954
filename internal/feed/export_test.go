package feed

// RingSlots is the slots of the conversation's window's ring: 0 without one.
func RingSlots(f *Feed, conversationID string) int {
	c := f.conv(conversationID)
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ring)
}

// FirstRing is the slots of a window's first ring.
const FirstRing = firstRing
