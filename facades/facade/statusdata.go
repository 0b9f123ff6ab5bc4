package facade

import "github.com/provisiond/provisiond/rpc"

// StatusData returns stored status data as a reply carries it. Data is
// bounded when it arrives (rpc.MaxValueDepth, rpc.MaxValueBytes per value;
// state.MaxStatusData in all), so this only matters for a database written
// by a build that did not bound it, or a restored one: data with a value
// over the bounds is replaced by a note, so that a status reply stays
// readable by every client (a value nested 9,995 deep made
// encoding/json's and Python's decoders fail on the whole reply).
func StatusData(data map[string]any) map[string]any {
	for _, v := range data {
		if rpc.CheckValue("", v) != nil {
			return map[string]any{"error": "status data over the limits of free-form values not shown"}
		}
	}
	return data
}
