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
//!
//! A filtered subscription ([`Dispatcher::filtered`]) is handed only new objects, deletions and
//! updates that a [`Changed`] test tells from the version the cache held before: the test runs
//! once per event for all its subscribers, against the object the cache already holds, so no
//! subscriber keeps a fingerprint per object (at 50,000 nodes, 23 such maps cost 0.7 KiB per GPU
//! node).

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
        reflector::{ObjectRef, Store, store::Writer},
        watcher,
    },
};

/// Whether an update matters to a filtered subscription: `changed(old, new)`, with the version
/// the cache held before and the one the event brought.
pub type Changed<K> = fn(&K, &K) -> bool;

/// The sending side, fed by one reflector's events.
pub struct Dispatcher<K>
where
    K: Resource,
    K::DynamicType: Eq + std::hash::Hash,
{
    all: Channel<K>,
    /// The filtered channels, each with its test.
    filtered: Vec<(Changed<K>, Channel<K>)>,
    /// While a (re)list runs: the cache as it was before it, to hand out only what it changed.
    before_list: Mutex<HashMap<ObjectRef<K>, Arc<K>>>,
}

/// One broadcast channel.
struct Channel<K> {
    sender: Sender<Arc<K>>,
    /// Keeps the channel open while no subscriber is active.
    _open: InactiveReceiver<Arc<K>>,
}

impl<K> Channel<K> {
    /// A channel holding `capacity` changes, and its first subscription.
    fn new(capacity: usize) -> (Self, Changes<K>) {
        let (mut sender, receiver) = async_broadcast::broadcast(capacity);
        // With no subscriber active, changes are dropped rather than held until one comes.
        sender.set_await_active(false);
        let open = receiver.clone().deactivate();
        (
            Self {
                sender,
                _open: open,
            },
            Changes {
                receiver,
                replay: VecDeque::new(),
            },
        )
    }

    async fn send(&self, object: Arc<K>) {
        // Fails only when the channel is closed, which `_open` prevents.
        let _ = self.sender.broadcast_direct(object).await;
    }
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
    /// How many objects of a resumed cache are still to be handed out, and the room its buffer
    /// keeps for them.
    #[cfg(test)]
    fn replay_held(&self) -> (usize, usize) {
        (self.replay.len(), self.replay.capacity())
    }

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
    let (all, changes) = Channel::new(capacity);
    (
        Dispatcher {
            all,
            filtered: Vec::new(),
            before_list: Mutex::new(HashMap::new()),
        },
        changes,
    )
}

/// Applies `events` (a watcher's) to the cache `writer` fills, then hands each change to the
/// returned subscription (a channel of `capacity`) and to one filtered subscription per test of
/// `filters`; the returned stream passes the events on and must be polled for any to happen.
pub fn reflect<K, S, const N: usize>(
    events: S,
    mut writer: Writer<K>,
    capacity: usize,
    filters: [Changed<K>; N],
) -> (
    Changes<K>,
    [Changes<K>; N],
    impl Stream<Item = S::Item> + Send,
)
where
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    let (mut dispatcher, changes) = channel(capacity);
    let filtered = filters.map(|changed| dispatcher.filtered(changed, capacity));
    let dispatcher = Arc::new(dispatcher);
    let cache = writer.as_reader();
    let stream = events
        .map(move |event| {
            let old = event.as_ref().ok().and_then(|e| apply(&mut writer, e));
            (event, old)
        })
        .then(move |(event, old)| {
            let (dispatcher, cache) = (dispatcher.clone(), cache.clone());
            async move {
                if let Ok(event) = &event {
                    dispatcher.dispatch(event, old, &cache).await;
                }
                event
            }
        });
    (changes, filtered, stream)
}

/// Applies `event` to the cache `writer` fills; returns the version an applied object replaced.
pub fn apply<K>(writer: &mut Writer<K>, event: &watcher::Event<K>) -> Option<Arc<K>>
where
    K: Resource + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    let old = match event {
        watcher::Event::Apply(object) => writer.as_reader().get(&ObjectRef::from_obj(object)),
        _ => None,
    };
    writer.apply_watcher_event(event);
    old
}

impl<K> Dispatcher<K>
where
    K: Resource + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    /// A subscription handed only new objects, deletions and the updates `test` tells from
    /// the cached version, through a channel of `capacity`; made before the first dispatch.
    pub fn filtered(&mut self, test: Changed<K>, capacity: usize) -> Changes<K> {
        let (channel, subscription) = Channel::new(capacity);
        self.filtered.push((test, channel));
        subscription
    }

    /// Hands the object of `event` to every subscriber (after the reflector applied it to
    /// `cache`; `old` is the version an applied object replaced): an applied object as the cache
    /// now holds it, a deleted one marked deleted, and at the end of a (re)list what the list
    /// changed (every object, the first time).
    pub async fn dispatch(&self, event: &watcher::Event<K>, old: Option<Arc<K>>, cache: &Store<K>) {
        match event {
            watcher::Event::Apply(object) => {
                let cached = cache.get(&ObjectRef::from_obj(object));
                self.send(cached.unwrap_or_else(|| Arc::new(object.clone())), old)
                    .await;
            }
            watcher::Event::Delete(object) => {
                self.send(Arc::new(deleted(object.clone())), None).await;
            }
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
                for (object, old) in self.changed_by_list(cache) {
                    self.send(object, old).await;
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
    /// before the list, each with the version it replaced, then those the list no longer has,
    /// marked deleted.
    fn changed_by_list(&self, cache: &Store<K>) -> Vec<(Arc<K>, Option<Arc<K>>)> {
        let mut before = std::mem::take(&mut *self.before_list());
        let mut changed: Vec<(Arc<K>, Option<Arc<K>>)> = cache
            .state()
            .into_iter()
            .filter_map(|object| {
                let old = before.remove(&ObjectRef::from_obj(&*object));
                match old {
                    Some(old) if same_version(&*old, &*object) => None,
                    old => Some((object, old)),
                }
            })
            .collect();
        changed.extend(
            before
                .into_values()
                .map(|gone| (Arc::new(deleted((*gone).clone())), None)),
        );
        changed
    }

    /// Hands `object` to every plain subscriber, and to each filtered one whose test tells it
    /// from `old` (the version it replaced; none for a new or deleted object: always passed).
    async fn send(&self, object: Arc<K>, old: Option<Arc<K>>) {
        for (changed, channel) in &self.filtered {
            if old.as_deref().is_none_or(|old| changed(old, &object)) {
                channel.send(object.clone()).await;
            }
        }
        self.all.send(object).await;
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
            if self.replay.is_empty() {
                // Its buffer was sized for the whole cache; a subscription lives as long as its
                // leadership term, and would keep a pointer's worth per object for nothing.
                self.replay = VecDeque::new();
            }
            return Poll::Ready(Some(object));
        }
        Pin::new(&mut self.receiver).poll_next(cx)
    }
}

#[cfg(test)]
mod tests;
