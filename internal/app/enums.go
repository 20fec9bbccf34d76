package app

import enumspb "go.temporal.io/api/enums/v1"

type enumsType = enumspb.IndexedValueType
