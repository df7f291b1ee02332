<?php

namespace App\Providers;

use App\Auth\UserTokenGuard;
use Illuminate\Support\Facades\Auth;
use Illuminate\Support\ServiceProvider;

class AuthServiceProvider extends ServiceProvider
{
    public function boot()
    {
        // config/auth.php: the api guard's driver.
        Auth::viaRequest('user-token', new UserTokenGuard((string) config('auth.user_token_secret')));
    }
}
