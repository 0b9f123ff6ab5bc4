// Package dashboard serves provisiond's live status page at /dashboard/ on
// the API port: a login form for controller users, the models, and per
// model its machines (containers under their hosts), applications, units,
// storage and pools, spaces and subnets, with whatever is in an error or
// stuck state called out; an activity feed of the model's last changes;
// the model's and each machine's and unit's recent changes with who made
// them, from the controller's history (history.go);
// and a chart of the daemon's own request, login, agent and commit
// figures (rates over the last 10 s); and the controller's store and
// daemons with the agents each has (cluster.go). It only reads: it is
// given the state's read methods (Reader) and the hub, never a way to
// write.
//
// # Live updates
//
// The page holds one server-sent events stream (GET /dashboard/events).
// The stream follows the hub, not a timer: a feed (feed.go) subscribes
// once per model kind to every model's changes and keeps the last changes
// of each model in a ring; a stream is woken by the changes of its model
// (and of the model list), sends them as the activity feed and a fresh
// snapshot of the model (at most one per SnapshotInterval, so a burst of
// commits costs one read), sends a metrics sample each second, and the
// cluster view when it changes (read at most every 2 s for all streams).
//
// # Sessions
//
// A login makes a session: a random token in a __Host- cookie (Secure,
// HttpOnly, SameSite=Strict, Path=/) whose SHA-256 is the key of the
// session in memory. A session ends at logout, after its lifetime or its
// idle time, when its user's password changes or the user is removed (the
// feed's subscription to users), when its user opens more than
// MaxSessionsPerUser (the oldest goes), and when the dashboard closes.
// Sessions live in the daemon that made them: in etcd mode every daemon
// serves the same page, read through its own state and hub, but a session
// is good only on the daemon that issued it.
//
// # Concurrency
//
// Every goroutine the package runs is an HTTP handler's, owned by the
// daemon's http.Server: a stream's loop runs on its request's goroutine
// and returns when the client goes (the request's context), its session
// ends, or Close is called (the daemon registers Close with
// http.Server.RegisterOnShutdown, so Shutdown does not wait on open
// streams). The feed's hub sinks run on the publisher's goroutine: they
// take the feed's mutex, append to a ring and signal streams without
// blocking. Dashboard is safe for concurrent use.
package dashboard
