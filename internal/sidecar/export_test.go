package sidecar

// OpenedStreams is how many ReconcileStreams c has opened.
func (c *Client) OpenedStreams() int { return int(c.streams.opened.Load()) }
