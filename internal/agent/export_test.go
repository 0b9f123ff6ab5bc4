package agent

// ParentOf is parentOf, for the tests.
var ParentOf = parentOf
