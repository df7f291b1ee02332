<?php

// response()->json() resolves Laravel's response factory, which needs the view service; the app
// has no views of its own.
return [
    'paths' => [],
    'compiled' => storage_path('framework/views'),
];
