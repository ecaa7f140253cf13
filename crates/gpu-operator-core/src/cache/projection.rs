//! `projection!`: the `kube::Resource` impl of a type that holds a few fields of a Kubernetes kind
//! (a Node's runtime, a Pod's summary, a Node's labels). The API paths are the kind's; the
//! metadata is the type's own `metadata` field. `metadata_only` makes `Api<Type>` request the API
//! server's metadata-only form.

/// Implements `kube::Resource` for `$type`, a projection of `$kind` with a `metadata` field.
#[macro_export]
macro_rules! projection {
    ($type:ty, $kind:ty, $scope:ty) => {
        $crate::projection!($type, $kind, $scope, metadata_api = false);
    };
    ($type:ty, $kind:ty, $scope:ty, metadata_only) => {
        $crate::projection!($type, $kind, $scope, metadata_api = true);
    };
    ($type:ty, $kind:ty, $scope:ty, metadata_api = $metadata_api:literal) => {
        impl ::kube::Resource for $type {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$kind as ::kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$kind as ::kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$kind as ::kube::Resource>::version(dt)
            }
            fn plural(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$kind as ::kube::Resource>::plural(dt)
            }
            fn metadata_api() -> bool {
                $metadata_api
            }
            fn meta(&self) -> &::kube::api::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ::kube::api::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
