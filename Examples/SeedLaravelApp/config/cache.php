<?php

// Nothing is cached across requests; artisan's commands only need a cache to exist.
return [
    'default' => 'array',
    'stores' => [
        'array' => ['driver' => 'array', 'serialize' => false],
    ],
    'prefix' => 'seed_app',
];
