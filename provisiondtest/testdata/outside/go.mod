// A module of its own that uses the test kit as another repository would:
// TestUsableFromAnotherModule vets a copy of it, with the replace pointing
// at this checkout.
module example.com/outside

go 1.26

require github.com/provisiond/provisiond v0.0.0

replace github.com/provisiond/provisiond => ../../..
