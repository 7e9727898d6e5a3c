//! A panic caught while running a request, by a listener's request task
//! (`listen::listener::guarded`) or an operation (`ops::handle`): logged
//! and counted, answered `internal`; the shard keeps serving.

/// Logs at error level and counts (`es_request_panics_total{listener}`) a
/// panic caught while running a request's `what` (its endpoint or
/// operation) on `listener`.
pub fn panicked(listener: &'static str, what: &str, panic: &(dyn std::any::Any + Send)) {
    let message = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    metrics::counter!("es_request_panics_total", "listener" => listener).increment(1);
    tracing::error!(
        listener,
        request = what,
        panic = message,
        "a request panicked and was answered internal; the shard keeps serving"
    );
}
