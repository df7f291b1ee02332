<?php

return [
    'defaults' => ['guard' => 'api'],
    'guards' => [
        // The user from an HS256 bearer token (App\Auth\UserTokenGuard).
        'api' => ['driver' => 'user-token'],
    ],
    'providers' => [],
    // The node's --user-token-secret: the same tokens work on both.
    'user_token_secret' => env('COUNTER_USER_TOKEN_SECRET', ''),
];
