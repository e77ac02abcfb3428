package queue

import "time"

// heapItem is an entry's place in a heap, as of one state change: when the
// entry changes again its gen moves on and the item is stale, dropped when
// it comes to the top (or when stale items outnumber live ones).
type heapItem struct {
	e   *entry
	gen uint32
	at  time.Time
}

func (it heapItem) live() bool { return !it.e.removed && it.gen == it.e.gen }

func bySeq(a, b *heapItem) bool      { return a.e.seq < b.e.seq }
func byDeadline(a, b *heapItem) bool { return a.at.Before(b.at) }

// itemHeap is a binary min-heap. It is container/heap without the
// interface conversions, which allocate on every Push and Pop.
type itemHeap struct {
	items []heapItem
	less  func(a, b *heapItem) bool
}

func (h *itemHeap) len() int { return len(h.items) }

func (h *itemHeap) push(it heapItem) {
	h.items = append(h.items, it)
	h.up(len(h.items) - 1)
}

func (h *itemHeap) pop() heapItem {
	n := len(h.items) - 1
	top := h.items[0]
	h.items[0] = h.items[n]
	h.items[n] = heapItem{}
	h.items = h.items[:n]
	if n > 0 {
		h.down(0)
	}
	return top
}

func (h *itemHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(&h.items[i], &h.items[p]) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *itemHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(&h.items[r], &h.items[l]) {
			m = r
		}
		if !h.less(&h.items[m], &h.items[i]) {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// trim drops stale items when there are no live ones (live is how many
// there are) or they outnumber the live ones, and restores the order.
func (h *itemHeap) trim(live int) {
	if live == 0 {
		clear(h.items)
		h.items = h.items[:0]
		return
	}
	if len(h.items) <= 2*live+64 {
		return
	}
	kept := h.items[:0]
	for _, it := range h.items {
		if it.live() {
			kept = append(kept, it)
		}
	}
	clear(h.items[len(kept):])
	h.items = kept
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
