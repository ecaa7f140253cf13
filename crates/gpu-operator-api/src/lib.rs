//! ClusterPolicy (`nvidia.com/v1`) types and the names shared across the operator. Pure data.
