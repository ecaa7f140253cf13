//! The change streams of the shared caches: every object the watch applied or deleted, as it
//! saw it, handed to each subscriber. kube's shared reflector hands its subscribers only applied
//! objects, looked up in the cache when the subscriber gets to them: a deleted DaemonSet,
//! ConfigMap, Node or CustomResourceDefinition woke no reconciler, and a subscriber whose object
//! had left the cache before it looked stopped being woken (its stream returned `Pending` with no
//! waker registered) until something else woke its task.
//!
//! A deleted object arrives with a deletion timestamp (set here when the API server's last
//! version had none), so a filter such as [`crate::pipeline::controller::changes`] tells it from an
//! update.
//!
//! A relist (the watch expired, say after the API server restarted) hands out only what it
//! changed: objects new or at another resource version, and those gone from the cache as
//! deleted. Handing out the whole cache again woke every reconciler for objects it had already
//! seen, and each woken reconcile listed pods: a relist storm behind every watch that resumed.

use std::{
    collections::{HashMap, VecDeque},
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use async_broadcast::{InactiveReceiver, Receiver, Sender};
use futures::{Stream, StreamExt as _};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Resource,
    runtime::{
        WatchStreamExt as _,
        reflector::{ObjectRef, Store, store::Writer},
        watcher,
    },
};

/// The sending side, fed by one reflector's events.
pub struct Dispatcher<K>
where
    K: Resource,
    K::DynamicType: Eq + std::hash::Hash,
{
    sender: Sender<Arc<K>>,
    /// Keeps the channel open while no subscriber is active.
    _open: InactiveReceiver<Arc<K>>,
    /// While a (re)list runs: the cache as it was before it, to hand out only what it changed.
    before_list: Mutex<HashMap<ObjectRef<K>, Arc<K>>>,
}

/// One subscriber's stream of changed objects. Each clone sees the changes from its creation on;
/// a subscriber that falls `capacity` changes behind holds back the reflector (back-pressure, as
/// kube's shared reflector does), so every stream handed out must be polled or dropped.
#[derive(Clone)]
pub struct Changes<K> {
    receiver: Receiver<Arc<K>>,
    /// Objects handed out before the channel's changes (see [`Standby::resume`]).
    replay: VecDeque<Arc<K>>,
}

/// A subscription kept while nobody consumes it (between two leadership terms): it holds no
/// change back, and [`Self::resume`] makes a live one again.
pub struct Standby<K> {
    receiver: InactiveReceiver<Arc<K>>,
}

impl<K> Changes<K> {
    /// A standby of this channel.
    pub fn standby(&self) -> Standby<K> {
        Standby {
            receiver: self.receiver.clone().deactivate(),
        }
    }
}

impl<K: Resource + Clone> Standby<K>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// A live subscription that first hands out every object of `cache` (as at the end of a
    /// list), then every change from now on: what a reconciler started now needs to see the
    /// world as its first start did. An object changed meanwhile may come twice; never missed.
    pub fn resume(&self, cache: &Store<K>) -> Changes<K> {
        let receiver = self.receiver.activate_cloned();
        Changes {
            receiver,
            replay: cache.state().into(),
        }
    }
}

/// A dispatcher and the first subscription of a channel holding `capacity` changes.
pub fn channel<K>(capacity: usize) -> (Dispatcher<K>, Changes<K>)
where
    K: Resource,
    K::DynamicType: Eq + std::hash::Hash,
{
    let (mut sender, receiver) = async_broadcast::broadcast(capacity);
    // With no subscriber active, changes are dropped rather than held until one comes.
    sender.set_await_active(false);
    let open = receiver.clone().deactivate();
    (
        Dispatcher {
            sender,
            _open: open,
            before_list: Mutex::new(HashMap::new()),
        },
        Changes {
            receiver,
            replay: VecDeque::new(),
        },
    )
}

/// Applies `events` (a watcher's) to the cache `writer` fills, then hands each change to the
/// returned subscription (a channel of `capacity`); the returned stream passes the events on and
/// must be polled for either to happen.
pub fn reflect<K, S>(
    events: S,
    writer: Writer<K>,
    capacity: usize,
) -> (Changes<K>, impl Stream<Item = S::Item> + Send)
where
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    let (dispatcher, changes) = channel(capacity);
    let dispatcher = Arc::new(dispatcher);
    let cache = writer.as_reader();
    let stream = events.reflect(writer).then(move |event| {
        let (dispatcher, cache) = (dispatcher.clone(), cache.clone());
        async move {
            if let Ok(event) = &event {
                dispatcher.dispatch(event, &cache).await;
            }
            event
        }
    });
    (changes, stream)
}

impl<K> Dispatcher<K>
where
    K: Resource + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    /// Hands the object of `event` to every subscriber (after the reflector applied it to
    /// `cache`): an applied object as the cache now holds it, a deleted one marked deleted, and at
    /// the end of a (re)list what the list changed (every object, the first time).
    pub async fn dispatch(&self, event: &watcher::Event<K>, cache: &Store<K>) {
        match event {
            watcher::Event::Apply(object) => {
                let cached = cache.get(&ObjectRef::from_obj(object));
                self.send(cached.unwrap_or_else(|| Arc::new(object.clone())))
                    .await;
            }
            watcher::Event::Delete(object) => self.send(Arc::new(deleted(object.clone()))).await,
            // The reflector applies a list's objects to its cache only at `InitDone`: here the
            // cache still holds what the last watch left.
            watcher::Event::Init => {
                *self.before_list() = cache
                    .state()
                    .into_iter()
                    .map(|object| (ObjectRef::from_obj(&*object), object))
                    .collect();
            }
            watcher::Event::InitDone => {
                for object in self.changed_by_list(cache) {
                    self.send(object).await;
                }
            }
            watcher::Event::InitApply(_) => {}
        }
    }

    fn before_list(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<K>, Arc<K>>> {
        self.before_list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The objects of `cache` (just listed) that are new or at another resource version than
    /// before the list, then those the list no longer has, marked deleted.
    fn changed_by_list(&self, cache: &Store<K>) -> Vec<Arc<K>> {
        let mut before = std::mem::take(&mut *self.before_list());
        let mut changed: Vec<Arc<K>> = cache
            .state()
            .into_iter()
            .filter(|object| {
                let old = before.remove(&ObjectRef::from_obj(&**object));
                !old.is_some_and(|old| same_version(&*old, &**object))
            })
            .collect();
        changed.extend(
            before
                .into_values()
                .map(|gone| Arc::new(deleted((*gone).clone()))),
        );
        changed
    }

    async fn send(&self, object: Arc<K>) {
        // Fails only when the channel is closed, which `_open` prevents.
        let _ = self.sender.broadcast_direct(object).await;
    }
}

/// Whether `a` and `b` are the same version of an object (an object without a resource version
/// is never taken for unchanged).
fn same_version<K: Resource>(a: &K, b: &K) -> bool {
    a.meta().resource_version.is_some() && a.meta().resource_version == b.meta().resource_version
}

/// `object` with a deletion timestamp.
fn deleted<K: Resource>(mut object: K) -> K {
    let meta = object.meta_mut();
    if meta.deletion_timestamp.is_none() {
        meta.deletion_timestamp = Some(Time(Timestamp::now()));
    }
    object
}

impl<K> Stream for Changes<K> {
    type Item = Arc<K>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(object) = self.replay.pop_front() {
            return Poll::Ready(Some(object));
        }
        Pin::new(&mut self.receiver).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use futures::{FutureExt as _, StreamExt as _};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{api::ObjectMeta, runtime::reflector};

    use super::*;

    fn config_map(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                resource_version: Some(version.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[tokio::test]
    async fn subscribers_see_applies_and_deletes_even_once_the_object_left_the_cache() {
        let (cache, mut writer) = reflector::store::<ConfigMap>();
        let (dispatcher, mut changes) = channel(16);
        let mut late = changes.clone();
        for event in [
            watcher::Event::Apply(config_map("a", "1")),
            watcher::Event::Delete(config_map("a", "1")),
        ] {
            writer.apply_watcher_event(&event);
            dispatcher.dispatch(&event, &cache).await;
        }
        assert!(cache.state().is_empty());
        for stream in [&mut changes, &mut late] {
            let applied = stream.next().await.unwrap();
            assert_eq!(applied.metadata.resource_version.as_deref(), Some("1"));
            assert!(applied.metadata.deletion_timestamp.is_none());
            let gone = stream.next().await.unwrap();
            assert_eq!(gone.metadata.name.as_deref(), Some("a"));
            assert!(gone.metadata.deletion_timestamp.is_some());
            // Nothing more, and the stream is still open (pending), not ended.
            assert!(stream.next().now_or_never().is_none());
        }
    }

    #[tokio::test]
    async fn the_end_of_a_list_hands_out_every_cached_object() {
        let (cache, mut writer) = reflector::store::<ConfigMap>();
        let (dispatcher, mut changes) = channel(16);
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(config_map("a", "1")),
            watcher::Event::InitApply(config_map("b", "2")),
            watcher::Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
            dispatcher.dispatch(&event, &cache).await;
        }
        let mut names = vec![
            changes.next().await.unwrap().metadata.name.clone(),
            changes.next().await.unwrap().metadata.name.clone(),
        ];
        names.sort();
        assert_eq!(names, [Some("a".to_owned()), Some("b".to_owned())]);
        assert!(changes.next().now_or_never().is_none());
    }

    #[tokio::test]
    async fn a_relist_hands_out_only_what_it_changed_and_what_it_no_longer_has() {
        let (cache, mut writer) = reflector::store::<ConfigMap>();
        let (dispatcher, mut changes) = channel(16);
        let list = |objects: Vec<ConfigMap>| {
            let mut events = vec![watcher::Event::Init];
            events.extend(objects.into_iter().map(watcher::Event::InitApply));
            events.push(watcher::Event::InitDone);
            events
        };
        let mut seen = Vec::new();
        for events in [
            list(vec![
                config_map("same", "1"),
                config_map("moved", "2"),
                config_map("gone", "3"),
            ]),
            list(vec![
                config_map("same", "1"),
                config_map("moved", "4"),
                config_map("new", "5"),
            ]),
        ] {
            for event in events {
                writer.apply_watcher_event(&event);
                dispatcher.dispatch(&event, &cache).await;
            }
            let mut passed = Vec::new();
            while let Some(object) = changes.next().now_or_never().flatten() {
                passed.push((
                    object.metadata.name.clone().unwrap_or_default(),
                    object.metadata.resource_version.clone().unwrap_or_default(),
                    object.metadata.deletion_timestamp.is_some(),
                ));
            }
            passed.sort();
            seen.push(passed);
        }
        let row = |name: &str, version: &str, deleted: bool| {
            (name.to_owned(), version.to_owned(), deleted)
        };
        assert_eq!(
            seen,
            [
                vec![
                    row("gone", "3", false),
                    row("moved", "2", false),
                    row("same", "1", false)
                ],
                vec![
                    row("gone", "3", true),
                    row("moved", "4", false),
                    row("new", "5", false)
                ],
            ],
            "the first list hands out everything; a relist what moved, what came and what left"
        );
    }

    #[tokio::test]
    async fn with_no_subscriber_left_changes_are_dropped_not_held() {
        let (cache, _writer) = reflector::store::<ConfigMap>();
        let (dispatcher, changes) = channel(1);
        drop(changes);
        for _ in 0..3 {
            // Would wait forever on a full channel if changes were held for nobody.
            dispatcher
                .dispatch(&watcher::Event::Apply(config_map("a", "1")), &cache)
                .await;
        }
    }

    #[tokio::test]
    async fn a_standby_holds_nothing_back_and_resumes_with_the_whole_cache_first() {
        let (cache, mut writer) = reflector::store::<ConfigMap>();
        let (dispatcher, changes) = channel(1);
        let standby = changes.standby();
        drop(changes);
        for event in [
            watcher::Event::Apply(config_map("a", "1")),
            watcher::Event::Apply(config_map("b", "2")),
            watcher::Event::Apply(config_map("a", "3")),
        ] {
            writer.apply_watcher_event(&event);
            // A channel of 1: would wait forever if the standby held changes.
            dispatcher.dispatch(&event, &cache).await;
        }
        let mut resumed = standby.resume(&cache);
        let mut seen: Vec<_> = vec![
            resumed
                .next()
                .await
                .unwrap()
                .metadata
                .resource_version
                .clone(),
            resumed
                .next()
                .await
                .unwrap()
                .metadata
                .resource_version
                .clone(),
        ];
        seen.sort();
        assert_eq!(seen, [Some("2".to_owned()), Some("3".to_owned())]);
        assert!(resumed.next().now_or_never().is_none(), "only the cache");
        let event = watcher::Event::Apply(config_map("b", "4"));
        writer.apply_watcher_event(&event);
        dispatcher.dispatch(&event, &cache).await;
        let live = resumed.next().await.unwrap();
        assert_eq!(live.metadata.resource_version.as_deref(), Some("4"));
    }
}
