<?php

use App\Http\Controllers\InspectionController;
use App\Http\Controllers\LikeController;
use Illuminate\Support\Facades\Route;

// The seed's route.
Route::middleware('auth:api')->post('/posts/{id}/like', [LikeController::class, 'toggleLike']);

// What the app reads through Eloquent (for the drop-in test; an app's own pages read the same).
Route::get('/inspect/posts/{id}', [InspectionController::class, 'post']);
Route::get('/inspect/users/{user}/likes', [InspectionController::class, 'userLikes']);
