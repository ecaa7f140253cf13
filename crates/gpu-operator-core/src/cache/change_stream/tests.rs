//! The change streams' behaviour: what each kind of subscriber is handed, and when.

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{api::ObjectMeta, runtime::reflector};

use super::*;

/// What `reflect` does with one event: the cache takes it, then the dispatcher hands it out.
async fn step(
    writer: &mut Writer<ConfigMap>,
    dispatcher: &Dispatcher<ConfigMap>,
    event: &watcher::Event<ConfigMap>,
) {
    let old = apply(writer, event);
    dispatcher.dispatch(event, old, &writer.as_reader()).await;
}

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
        step(&mut writer, &dispatcher, &event).await;
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
    let mut writer = Writer::<ConfigMap>::default();
    let (dispatcher, mut changes) = channel(16);
    for event in [
        watcher::Event::Init,
        watcher::Event::InitApply(config_map("a", "1")),
        watcher::Event::InitApply(config_map("b", "2")),
        watcher::Event::InitDone,
    ] {
        step(&mut writer, &dispatcher, &event).await;
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
    let mut writer = Writer::<ConfigMap>::default();
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
            step(&mut writer, &dispatcher, &event).await;
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
    let row =
        |name: &str, version: &str, deleted: bool| (name.to_owned(), version.to_owned(), deleted);
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
            .dispatch(&watcher::Event::Apply(config_map("a", "1")), None, &cache)
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
        // A channel of 1: would wait forever if the standby held changes.
        step(&mut writer, &dispatcher, &event).await;
    }
    let mut resumed = standby.resume(&cache);
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(
            resumed
                .next()
                .await
                .unwrap()
                .metadata
                .resource_version
                .clone(),
        );
    }
    seen.sort();
    assert_eq!(seen, [Some("2".to_owned()), Some("3".to_owned())]);
    assert_eq!(
        resumed.replay_held(),
        (0, 0),
        "the replay buffer is released"
    );
    assert!(resumed.next().now_or_never().is_none(), "only the cache");
    let event = watcher::Event::Apply(config_map("b", "4"));
    step(&mut writer, &dispatcher, &event).await;
    let live = resumed.next().await.unwrap();
    assert_eq!(live.metadata.resource_version.as_deref(), Some("4"));
}

#[tokio::test]
async fn a_filtered_subscription_gets_new_deleted_and_changed_objects_only() {
    let mut writer = Writer::<ConfigMap>::default();
    let (mut dispatcher, mut all) = channel(16);
    let data_changed: Changed<ConfigMap> = |old, new| old.data != new.data;
    let mut filtered = dispatcher.filtered(data_changed, 16);
    let with_data = |version: &str, value: &str| {
        let mut map = config_map("a", version);
        map.data = Some([("k".to_owned(), value.to_owned())].into());
        map
    };
    let list = |objects: Vec<ConfigMap>| {
        let mut events = vec![watcher::Event::Init];
        events.extend(objects.into_iter().map(watcher::Event::InitApply));
        events.push(watcher::Event::InitDone);
        events
    };
    let mut events = list(vec![with_data("1", "x")]);
    events.extend([
        watcher::Event::Apply(with_data("2", "x")), // only the version moved
        watcher::Event::Apply(with_data("3", "y")),
    ]);
    events.extend(list(vec![with_data("4", "y")])); // a relist: moved, same data
    events.extend(list(vec![with_data("5", "z")])); // a relist: changed
    events.push(watcher::Event::Delete(with_data("5", "z")));
    for event in &events {
        step(&mut writer, &dispatcher, event).await;
    }
    let drain = |changes: &mut Changes<ConfigMap>| {
        let mut versions = Vec::new();
        while let Some(object) = changes.next().now_or_never().flatten() {
            let version = object.metadata.resource_version.clone().unwrap_or_default();
            let deleted = object.metadata.deletion_timestamp.is_some();
            versions.push(format!(
                "{version}{}",
                if deleted { " deleted" } else { "" }
            ));
        }
        versions
    };
    assert_eq!(drain(&mut all), ["1", "2", "3", "4", "5", "5 deleted"]);
    assert_eq!(
        drain(&mut filtered),
        ["1", "3", "5", "5 deleted"],
        "new, changed, changed by a relist, deleted"
    );
}
