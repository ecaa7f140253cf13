//! Coalescing of reconcile triggers. A reconcile starts on the first event, with no quiet period
//! to wait out (kube-runtime's Controller with no debounce; events that arrive while a reconcile of
//! the same object runs are merged into one follow-up reconcile). The triggers that fire in
//! bursts only while pods roll out — DaemonSet status updates, node label changes — pass through
//! [`throttle`], so thousands of them wake an operand at most once per period, the first at once
//! and the last of a burst at the period's end. Changes of the owner (a ClusterPolicy, …) and of
//! ConfigMaps (what a user edits) are never throttled, and a reconcile whose owner got a newer
//! spec while it ran can drop its remaining work (see [`overtaken`]) so the follow-up starts at once.

use std::{
    collections::{BTreeMap, VecDeque},
    time::Duration,
};

use futures::{Stream, StreamExt as _, stream};
use kube::runtime::{
    controller,
    reflector::{ObjectRef, Store},
};
use tokio::{
    sync::Notify,
    time::{Instant, sleep_until},
};

use crate::contract::Owner;

/// How often at most a throttled trigger stream wakes a reconciler during a burst.
pub const BURST_PERIOD: Duration = Duration::from_millis(500);

/// The Controller configuration of every reconciler of an owner: no debounce, so a reconcile
/// starts on the first event (see the module docs).
pub fn config() -> controller::Config {
    controller::Config::default().debounce(Duration::ZERO)
}

/// Passes the first item of `items` at once; items that arrive within `period` of the previous
/// one passed are held, only the latest kept, and passed when the period ends. Every reconciler
/// behind it reads the current state from a cache, so a dropped intermediate item loses nothing.
pub fn throttle<S>(items: S, period: Duration) -> impl Stream<Item = S::Item> + Send
where
    S: Stream + Send + 'static,
    S::Item: Send,
{
    throttle_by(items, period, |_| ())
}

/// [`throttle`] keeping the latest item of each `key` while held (all passed when the period
/// ends): for items that wake different objects (DaemonSets of two NVIDIADrivers), where keeping
/// only the latest would drop the other's wake-up.
pub fn throttle_by<S, K, F>(
    items: S,
    period: Duration,
    key: F,
) -> impl Stream<Item = S::Item> + Send
where
    S: Stream + Send + 'static,
    S::Item: Send,
    K: Ord + Send + 'static,
    F: Fn(&S::Item) -> K + Send + 'static,
{
    struct State<S: Stream, K, F> {
        items: std::pin::Pin<Box<S>>,
        held: BTreeMap<K, S::Item>,
        /// Held items whose period ended, passed one by one.
        due: VecDeque<S::Item>,
        /// When the next item may pass at once.
        open_at: Instant,
        ended: bool,
        key: F,
    }
    let state = State {
        items: Box::pin(items),
        held: BTreeMap::new(),
        due: VecDeque::new(),
        open_at: Instant::now(),
        ended: false,
        key,
    };
    stream::unfold(state, move |mut state| async move {
        loop {
            if let Some(item) = state.due.pop_front() {
                return Some((item, state));
            }
            if state.ended {
                let held = std::mem::take(&mut state.held);
                state.due.extend(held.into_values());
                return state.due.pop_front().map(|item| (item, state));
            }
            let next = if state.held.is_empty() {
                state.items.next().await
            } else {
                tokio::select! {
                    biased;
                    () = sleep_until(state.open_at) => {
                        state.open_at = Instant::now() + period;
                        let held = std::mem::take(&mut state.held);
                        state.due.extend(held.into_values());
                        continue;
                    }
                    next = state.items.next() => next,
                }
            };
            match next {
                None => state.ended = true,
                Some(item) if state.held.is_empty() && Instant::now() >= state.open_at => {
                    state.open_at = Instant::now() + period;
                    return Some((item, state));
                }
                Some(item) => {
                    let key = (state.key)(&item);
                    state.held.insert(key, item);
                }
            }
        }
    })
}

/// Resolves once the cache `owners` no longer holds `owner` at its generation: a newer spec
/// arrived (or the object went away), so a reconcile of it follows. `events` is woken after each
/// event of its kind reached the cache.
pub async fn overtaken<K: Owner>(owners: &Store<K>, events: &Notify, owner: &K) {
    let key = ObjectRef::from_obj(owner);
    loop {
        let event = events.notified();
        let mut event = std::pin::pin!(event);
        // Registered before the cache is read, so an event in between still wakes this.
        event.as_mut().enable();
        let moved = owners.get(&key).is_none_or(|cached| {
            cached.meta().generation != owner.meta().generation
                || cached.meta().uid != owner.meta().uid
        });
        if moved {
            return;
        }
        event.await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::channel::mpsc;
    use gpu_operator_api::ClusterPolicy;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{Controller, controller::Action, reflector::store::Writer, watcher::Event};

    use super::*;

    /// Times are virtual (the clock is paused and only moves when every task waits), so what the
    /// test reads is the schedule itself, not how fast this machine runs it.
    #[tokio::test(start_paused = true)]
    async fn a_keyed_burst_keeps_the_latest_item_of_each_key() {
        let (tx, rx) = mpsc::unbounded::<(char, u32)>();
        let start = Instant::now();
        let feeder = tokio::spawn(async move {
            // Two owners' DaemonSets change within one period.
            for (at, item) in [
                (0, ('a', 1)),
                (100, ('b', 2)),
                (200, ('a', 3)),
                (300, ('a', 4)),
                (2000, ('c', 5)),
            ] {
                sleep_until(start + Duration::from_millis(at)).await;
                tx.unbounded_send(item).unwrap();
            }
        });
        let passed: Vec<((char, u32), u128)> =
            throttle_by(rx, Duration::from_millis(500), |(owner, _)| *owner)
                .map(|item| (item, (Instant::now() - start).as_millis()))
                .collect()
                .await;
        feeder.await.unwrap();
        assert_eq!(
            passed,
            [
                (('a', 1), 0),
                (('a', 4), 500),
                (('b', 2), 500),
                (('c', 5), 2000)
            ],
            "b's change is not dropped for a's later one"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_its_first_item_at_once_and_its_last_at_the_period_end() {
        let (tx, rx) = mpsc::unbounded::<u32>();
        let start = Instant::now();
        let feeder = tokio::spawn(async move {
            // A burst at 0, 100, 200 and 300 ms, then a lone item long after.
            for (at, item) in [(0, 1), (100, 2), (200, 3), (300, 4), (2000, 5)] {
                sleep_until(start + Duration::from_millis(at)).await;
                tx.unbounded_send(item).unwrap();
            }
        });
        let passed: Vec<(u32, u128)> = throttle(rx, Duration::from_millis(500))
            .map(|item| (item, (Instant::now() - start).as_millis()))
            .collect()
            .await;
        feeder.await.unwrap();
        assert_eq!(
            passed,
            [(1, 0), (4, 500), (5, 2000)],
            "items 2 and 3 are folded into 4, which waits for the period to end"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_held_item_is_not_lost_when_the_stream_ends() {
        let items = stream::iter([1, 2, 3]);
        let passed: Vec<u32> = throttle(items, Duration::from_secs(1)).collect().await;
        assert_eq!(passed, [1, 3]);
    }

    fn config_map(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.to_owned());
        cm.metadata.namespace = Some("ns".to_owned());
        cm
    }

    struct Ctx {
        gate: Mutex<Option<futures::channel::oneshot::Receiver<()>>>,
        started: mpsc::UnboundedSender<String>,
        log: Mutex<Vec<(String, Instant)>>,
    }

    /// A Controller built with [`config`]: the first event starts a reconcile at once (no virtual
    /// time passes), the events that arrive while it runs make one more reconcile, not one each.
    #[tokio::test(start_paused = true)]
    async fn a_reconcile_starts_on_the_first_event_and_merges_what_arrives_while_it_runs() {
        let mut writer = Writer::<ConfigMap>::default();
        for event in [
            Event::Init,
            Event::InitApply(config_map("a")),
            Event::InitApply(config_map("b")),
            Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
        }
        let (triggers, trigger_rx) = mpsc::unbounded::<Arc<ConfigMap>>();
        // The first reconcile waits for `release`; every reconcile logs (name, virtual time).
        let (release, released) = futures::channel::oneshot::channel::<()>();
        let (started_tx, mut started) = mpsc::unbounded::<String>();
        let ctx = Arc::new(Ctx {
            gate: Mutex::new(Some(released)),
            started: started_tx,
            log: Mutex::new(Vec::new()),
        });
        let reconcile = |cm: Arc<ConfigMap>, ctx: Arc<Ctx>| async move {
            let name = cm.metadata.name.clone().unwrap_or_default();
            ctx.log.lock().unwrap().push((name.clone(), Instant::now()));
            ctx.started.unbounded_send(name).unwrap();
            let gate = ctx.gate.lock().unwrap().take();
            if let Some(gate) = gate {
                let _ = gate.await;
            }
            Ok::<_, std::io::Error>(Action::await_change())
        };
        let controller = Controller::for_shared_stream(trigger_rx, writer.as_reader())
            .with_config(config())
            .run(reconcile, |_, _, _| Action::await_change(), ctx.clone());
        let mut results = Box::pin(controller);
        let driver = async {
            let sent_at = Instant::now();
            triggers.unbounded_send(Arc::new(config_map("a"))).unwrap();
            assert_eq!(started.next().await.as_deref(), Some("a"));
            // Three more events while the first reconcile runs.
            for _ in 0..3 {
                triggers.unbounded_send(Arc::new(config_map("a"))).unwrap();
                tokio::task::yield_now().await;
            }
            release.send(()).unwrap();
            assert_eq!(started.next().await.as_deref(), Some("a"));
            // The marker: an event of another object, sent after the merged reconcile started.
            triggers.unbounded_send(Arc::new(config_map("b"))).unwrap();
            assert_eq!(started.next().await.as_deref(), Some("b"));
            sent_at
        };
        let sent_at = tokio::select! {
            sent_at = driver => sent_at,
            () = async { while results.next().await.is_some() {} } => unreachable!("the controller ended"),
        };
        let log = ctx.log.lock().unwrap().clone();
        let names: Vec<&str> = log.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["a", "a", "b"],
            "four events of `a` make two reconciles"
        );
        // The timer wheel rounds to a millisecond; a quiet period would show as its whole length.
        assert!(
            log[0].1 - sent_at < Duration::from_millis(5),
            "the first reconcile starts without waiting out a quiet period: {:?}",
            log[0].1 - sent_at
        );
    }

    fn cluster_policy(generation: i64, status: &str) -> ClusterPolicy {
        let mut p = ClusterPolicy::new("p", gpu_operator_api::ClusterPolicySpec::default());
        p.metadata.uid = Some("u".to_owned());
        p.metadata.generation = Some(generation);
        p.metadata.resource_version = Some(status.to_owned());
        p
    }

    #[tokio::test]
    async fn a_reconcile_is_overtaken_by_a_newer_spec_not_by_a_status_write() {
        let mut writer = Writer::<ClusterPolicy>::default();
        writer.apply_watcher_event(&Event::Apply(cluster_policy(1, "a")));
        let cache = writer.as_reader();
        let events = Notify::new();
        let reconciled = cluster_policy(1, "a");
        let overtaken = overtaken(&cache, &events, &reconciled);
        let mut overtaken = std::pin::pin!(overtaken);
        assert!(
            futures::poll!(overtaken.as_mut()).is_pending(),
            "the cache holds the reconciled generation"
        );
        // A status write: same generation.
        writer.apply_watcher_event(&Event::Apply(cluster_policy(1, "b")));
        events.notify_waiters();
        assert!(futures::poll!(overtaken.as_mut()).is_pending());
        // The marker: a spec change.
        writer.apply_watcher_event(&Event::Apply(cluster_policy(2, "c")));
        events.notify_waiters();
        assert!(futures::poll!(overtaken.as_mut()).is_ready());
        // Gone from the cache counts too; and it resolves at once when the cache is already ahead.
        let deleted = Writer::<ClusterPolicy>::default().as_reader();
        assert!(
            futures::poll!(std::pin::pin!(super::overtaken(
                &deleted,
                &events,
                &reconciled
            )))
            .is_ready()
        );
    }
}
